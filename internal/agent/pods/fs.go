package pods

import "os"

func touch(dir, file string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	_ = os.Chmod(file, 0o666)
	return f.Close()
}
