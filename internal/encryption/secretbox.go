package encryption

import (
	"crypto/rand"
	"errors"

	naclsecretbox "golang.org/x/crypto/nacl/secretbox"
)

type secretbox struct {
	pfx []byte
	key [32]byte
}

func (s *secretbox) prefix() []byte { return s.pfx }

func (s *secretbox) seal(_ string, plain []byte) ([]byte, error) {
	var nonce [24]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(s.pfx)+24+len(plain)+naclsecretbox.Overhead)
	out = append(out, s.pfx...)
	out = append(out, nonce[:]...)
	return naclsecretbox.Seal(out, plain, &nonce, &s.key), nil
}

func (s *secretbox) open(_ string, sealed []byte) ([]byte, error) {
	if len(sealed) < 24 {
		return nil, errors.New("secretbox: the stored data was shorter than the required size")
	}
	var nonce [24]byte
	copy(nonce[:], sealed[:24])
	out, ok := naclsecretbox.Open(nil, sealed[24:], &nonce, &s.key)
	if !ok {
		return nil, errors.New("secretbox: output array was not large enough for encryption")
	}
	return out, nil
}
