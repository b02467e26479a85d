// Package nats runs Kube's embedded NATS JetStream server and provisions streams and users on
// any NATS server that a server entry names.
//
// [Embedded] is nats-server/v2 in-process: JetStream with its store under the data directory,
// a loopback listener, and an admin user whose password is generated once and kept beside
// the store. Its authentication is Kube's user directory ([Directory]): the admin plus one
// user per Topic, kept in the JetStream key-value bucket KUBE_USERS on the server itself, so
// that a provisioning client that only has the server entry's URL can add and remove users
// (nats-server's own user list is static configuration; the directory is read through a KV
// watch, so a user works within milliseconds of being written and stops on delete).
//
// [Client] is the provisioning side over nats.go's jetstream package: [Client.EnsureStream]
// creates or updates a stream, [Client.StreamInfo] reports messages, bytes and consumers,
// [Client.DeleteStream] removes it, [Client.PutUser]/[Client.DeleteUser] manage directory
// users. [StreamConfig] and [UserPermissions] are the pure decisions (what the stream and the
// user's permissions are for a Topic), table-tested.
//
// A user written to the directory of a server that is not Kube's embedded one is not enforced
// by that server: such a server must have its users configured by its admin.
package nats
