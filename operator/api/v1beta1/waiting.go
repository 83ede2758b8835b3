package v1beta1

// ImagePullReasons are the kubelet's waiting reasons for an image it could not pull, at the pull
// and in the back-off that follows. A job whose replicas wait on any of them waits with the one
// reason ImagePullBackOff in its Running condition: one reason to a user, not one per retry.
var ImagePullReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "RegistryUnavailable": true, "SignatureValidationFailed": true,
}
