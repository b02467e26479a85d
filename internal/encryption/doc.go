// Package encryption is encryption at rest: it reads an apiserver.config.k8s.io/v1
// EncryptionConfiguration (--encryption-provider-config) and builds the storage.Transformer
// that seals the stored values of the listed resources.
//
// The providers are aescbc, aesgcm, secretbox and identity (kms is refused). Sealed values
// use kube-apiserver's format, "k8s:enc:<provider>:v1:<keyname>:" followed by the ciphertext
// (aescbc: IV and PKCS#7-padded CBC; aesgcm: 12-byte nonce and GCM with the etcd key as
// additional data; secretbox: 24-byte nonce and NaCl secretbox). The first provider of a
// resource writes; every provider (every key) reads. A value read with anything but the
// first provider's first key is stale: the store rewrites it on the next update, so a key
// rotation is "put the new key first, rewrite every object (kube encryption rewrite), drop
// the old key".
package encryption
