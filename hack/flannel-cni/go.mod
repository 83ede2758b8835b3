// Module flannel-cni builds flannel's CNI plugin, which hands each pod to the bridge plugin with
// the node's flannel subnet. It lives in containernetworking/plugins up to v0.9.1; its later home,
// github.com/flannel-io/cni-plugin, is not served by the module proxy.
module github.com/mlkube/mlkube/hack/flannel-cni

go 1.26.0

require (
	github.com/Microsoft/go-winio v0.4.11 // indirect
	github.com/Microsoft/hcsshim v0.8.6 // indirect
	github.com/buger/jsonparser v0.0.0-20180808090653-f4dd9f5a6b44 // indirect
	github.com/containernetworking/cni v0.8.1 // indirect
	github.com/containernetworking/plugins v0.9.1 // indirect
	github.com/sirupsen/logrus v1.0.6 // indirect
	golang.org/x/crypto v0.0.0-20200622213623-75b288015ac9 // indirect
	golang.org/x/sys v0.0.0-20201117170446-d9b008d0a637 // indirect
)

tool github.com/containernetworking/plugins/plugins/meta/flannel
