package gateway

import "sync"

// bufferPool recycles the ReverseProxy's copy buffers (32 KiB each).
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

func (bufferPool) Get() []byte { return *(buffers.Get().(*[]byte)) }

func (bufferPool) Put(b []byte) { buffers.Put(&b) }
