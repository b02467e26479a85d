// Package deflate compresses and decompresses byte slices with DEFLATE (compress/flate),
// reusing the compressors and decompressors: a flate.Writer allocates about 1 MB and a
// reader about 40 KB, far more than the small documents Kube keeps compressed in memory
// (CRD schemas in the CRD controller, objects in packed watch caches).
//
// Compression favours speed (flate.BestSpeed): these are compressed on hot paths (every
// write of a packed resource) and are small; the stronger levels save little on them.
//
// Usage:
//
//	packed := deflate.Compress(jsonBytes)
//	jsonBytes, err := deflate.Decompress(packed)
package deflate
