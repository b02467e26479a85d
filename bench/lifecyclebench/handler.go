package main

import toolscache "k8s.io/client-go/tools/cache"

func toolsHandler(f func(any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }}
}
