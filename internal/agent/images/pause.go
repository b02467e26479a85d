package images

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	goruntime "runtime"
)

// PauseRef is the name of the sandbox image Kube makes itself.
const PauseRef = "kube.local/pause:1"

// pauseELF is a static x86-64 ELF executable: one PT_LOAD segment whose code is
//
//	loop: mov eax, 34   ; pause(2)
//	      syscall
//	      jmp loop
//
// Built here byte by byte so that a machine with no registry and no compiler still has a
// sandbox image. Pure.
func pauseELF() []byte {
	const base = 0x400000
	code := []byte{0xb8, 0x22, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7}
	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+phsize+len(code))
	le := binary.LittleEndian
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	le.PutUint16(b[16:], 2)                  // ET_EXEC
	le.PutUint16(b[18:], 62)                 // EM_X86_64
	le.PutUint32(b[20:], 1)                  // EV_CURRENT
	le.PutUint64(b[24:], base+ehsize+phsize) // entry
	le.PutUint64(b[32:], ehsize)             // phoff
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], 1) // phnum
	p := b[ehsize:]
	le.PutUint32(p[0:], 1) // PT_LOAD
	le.PutUint32(p[4:], 5) // R+X
	le.PutUint64(p[16:], base)
	le.PutUint64(p[24:], base)
	le.PutUint64(p[32:], uint64(len(b)))
	le.PutUint64(p[40:], uint64(len(b)))
	le.PutUint64(p[48:], 0x1000)
	copy(b[ehsize+phsize:], code)
	return b
}

// WritePause writes the sandbox image PauseRef as an OCI archive at path.
func WritePause(path string) error {
	if goruntime.GOARCH != "amd64" {
		return fmt.Errorf("images: the built-in pause image is x86-64 only; import one for %s with --pod-infra-image", goruntime.GOARCH)
	}
	return WriteOCIFile(path, PauseRef, "amd64", Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		[]File{{Path: "pause", Mode: 0o755, Data: pauseELF()}, {Path: "dev", Mode: fs.ModeDir | 0o755}, {Path: "proc", Mode: fs.ModeDir | 0o755}, {Path: "sys", Mode: fs.ModeDir | 0o755}})
}
