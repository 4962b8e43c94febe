// main.go: the test suite's Kubernetes API server: kube-apiserver's command from the
// k8s.io/kubernetes module at the release go.mod pins, and nothing else.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as upstream's main
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
