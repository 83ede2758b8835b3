package docker

import (
	"context"
	"regexp"
	"time"
)

// The operator says which image a job waits on: "worker-0..1: cannot pull
// example.com/my-trainer:v1: <the kubelet's words>" (ImagePullBackOff), or the kubelet's
// `Container image "my-trainer:v1" is not present with pull policy of Never` (ErrImageNeverPull).
var (
	cannotPull = regexp.MustCompile(`cannot pull (\S+?):? `)
	notPresent = regexp.MustCompile(`Container image "([^"]+)" is not present`)
)

// WaitingHint says what to do about a job that waits (its Running condition's reason and
// message) on an image the nodes cannot get and the local Docker engine does not hold either:
// devctl run loads what the engine holds before it creates a job, so that image must be built
// or pulled there first. "" when the job waits on something else, or the engine holds the image.
func WaitingHint(reason, message string) string {
	var m []string
	switch reason {
	case "ImagePullBackOff":
		m = cannotPull.FindStringSubmatch(message)
	case "ErrImageNeverPull":
		m = notPresent.FindStringSubmatch(message)
	}
	if m == nil {
		return ""
	}
	image := m[1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	have, err := InEngine(ctx, []string{image})
	if err != nil || len(have) > 0 {
		return ""
	}
	return image + " is not in the local Docker engine either: docker build it (or docker pull it, where a registry answers), then devctl run loads it into the nodes (or devctl load " + image + "); or push it to the local registry (docker push localhost:5001/NAME:TAG) and name that in the job"
}
