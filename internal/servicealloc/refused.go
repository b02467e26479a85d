package servicealloc

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// errNoStorage answers any use of the storage behind upstream's Service REST: Kube uses
// only that REST's allocation hooks, never its store.
var errNoStorage = errors.New("servicealloc: upstream's Service storage is not used")

// refusedDecorator gives upstream's Service REST a storage that refuses every call.
func refusedDecorator(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error),
	func() runtime.Object, func() runtime.Object, storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers,
) (storage.Interface, factory.DestroyFunc, error) {
	return refusedStorage{}, func() {}, nil
}

type refusedStorage struct{}

var _ storage.Interface = refusedStorage{}

func (refusedStorage) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }
func (refusedStorage) Create(context.Context, string, runtime.Object, runtime.Object, uint64) error {
	return errNoStorage
}
func (refusedStorage) Delete(context.Context, string, runtime.Object, *storage.Preconditions, storage.ValidateObjectFunc, runtime.Object, storage.DeleteOptions) error {
	return errNoStorage
}
func (refusedStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return nil, errNoStorage
}
func (refusedStorage) Get(context.Context, string, storage.GetOptions, runtime.Object) error {
	return errNoStorage
}
func (refusedStorage) GetList(context.Context, string, storage.ListOptions, runtime.Object) error {
	return errNoStorage
}
func (refusedStorage) GuaranteedUpdate(context.Context, string, runtime.Object, bool, *storage.Preconditions, storage.UpdateFunc, runtime.Object) error {
	return errNoStorage
}
func (refusedStorage) Stats(context.Context) (storage.Stats, error) {
	return storage.Stats{}, errNoStorage
}
func (refusedStorage) ReadinessCheck() error                      { return nil }
func (refusedStorage) RequestWatchProgress(context.Context) error { return errNoStorage }
func (refusedStorage) GetCurrentResourceVersion(context.Context) (uint64, error) {
	return 0, errNoStorage
}
func (refusedStorage) EnableResourceSizeEstimation(storage.KeysFunc) error { return nil }
func (refusedStorage) CompactRevision() int64                              { return 0 }
