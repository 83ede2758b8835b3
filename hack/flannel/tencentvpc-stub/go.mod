// A stand-in for Tencent Cloud's VPC SDK, whose versions the module proxy refuses. flannel links
// its tencent-vpc backend whatever backend runs; mlkube's clusters use host-gw, and with this
// stand-in the tencent-vpc backend only reports that it is not in this build.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.26.0
