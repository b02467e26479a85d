package postgres

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// ScramVerifier is the SCRAM-SHA-256 verifier PostgreSQL stores for password (the form
// CREATE/ALTER ROLE … PASSWORD accepts pre-hashed), with a random salt.
func ScramVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	return scramVerifier(password, salt, scramIterations)
}

func scramVerifier(password string, salt []byte, iter int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	if err != nil {
		return "", err
	}
	clientKey := hmacSum(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	serverKey := hmacSum(salted, "Server Key")
	b := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iter, b(salt), b(stored[:]), b(serverKey)), nil
}

// VerifierMatches reports whether verifier (as pg_authid.rolpassword holds it) was made from
// password: the salted password recomputed with the verifier's salt and iterations gives
// its StoredKey and ServerKey. A verifier of another form (md5, none) does not match.
func VerifierMatches(verifier, password string) bool {
	rest, ok := strings.CutPrefix(verifier, "SCRAM-SHA-256$")
	if !ok {
		return false
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return false
	}
	iterS, salt64, ok := strings.Cut(params, ":")
	if !ok {
		return false
	}
	iter, err := strconv.Atoi(iterS)
	if err != nil || iter <= 0 || iter > 1<<24 {
		return false
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		return false
	}
	want, err := scramVerifier(password, salt, iter)
	if err != nil {
		return false
	}
	_, wantKeys, _ := strings.Cut(strings.TrimPrefix(want, "SCRAM-SHA-256$"), "$")
	return subtle.ConstantTimeCompare([]byte(wantKeys), []byte(keys)) == 1
}

func hmacSum(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
