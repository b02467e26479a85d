package nats

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// UsersBucket is the JetStream key-value bucket that holds Kube's user directory.
const UsersBucket = "KUBE_USERS"

// AdminUser is the embedded server's admin user.
const AdminUser = "kube-admin"

// UserRecord is what the directory keeps for one user (the value under its name in
// UsersBucket). The password is kept as its SHA-256: passwords are generated with 256 bits of
// entropy, so a slow hash adds nothing.
type UserRecord struct {
	PasswordSHA256 string   `json:"passwordSHA256"`
	Publish        []string `json:"publish"`
	Subscribe      []string `json:"subscribe"`
}

// HashPassword is the PasswordSHA256 of a password.
func HashPassword(pw string) string {
	s := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(s[:])
}

// Directory is the embedded server's view of the users: the admin, and the records read from
// UsersBucket. It implements nats-server's Authentication.
type Directory struct {
	adminHash string

	mu    sync.RWMutex
	users map[string]UserRecord
}

var _ server.Authentication = (*Directory)(nil)

// NewDirectory returns a directory that knows only the admin.
func NewDirectory(adminPassword string) *Directory {
	return &Directory{adminHash: HashPassword(adminPassword), users: map[string]UserRecord{}}
}

// Put records (or replaces) a user from its stored JSON value.
func (d *Directory) Put(name string, value []byte) error {
	var r UserRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return fmt.Errorf("user %q: %w", name, err)
	}
	d.mu.Lock()
	d.users[name] = r
	d.mu.Unlock()
	return nil
}

// Delete forgets a user; its open connections stay until they reconnect.
func (d *Directory) Delete(name string) {
	d.mu.Lock()
	delete(d.users, name)
	d.mu.Unlock()
}

// Check authenticates a connecting client: the admin gets every permission, a directory user
// the permissions of its record, anyone else is refused.
func (d *Directory) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil || o.Username == "" {
		return false
	}
	hash := HashPassword(o.Password)
	if o.Username == AdminUser {
		if subtle.ConstantTimeCompare([]byte(hash), []byte(d.adminHash)) != 1 {
			return false
		}
		c.RegisterUser(&server.User{Username: AdminUser})
		return true
	}
	d.mu.RLock()
	r, ok := d.users[o.Username]
	d.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare([]byte(hash), []byte(r.PasswordSHA256)) != 1 {
		return false
	}
	c.RegisterUser(&server.User{Username: o.Username, Permissions: &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string(nil), r.Publish...)},
		Subscribe: &server.SubjectPermission{Allow: append([]string(nil), r.Subscribe...)},
	}})
	return true
}
