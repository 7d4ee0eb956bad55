// Command etcd: the etcd server of the integration tier's Kubernetes API server (infra/k8s.sh install),
// built from go.etcd.io/etcd/server/v3 the way etcd's own main.go calls it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
