package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// The operator starts once the apiserver answers, not at its first failed call: the first two
// answers here are errors, the third the version.
func TestWaitForAPIServerRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"34","gitVersion":"v1.34.4"}`)
	}))
	defer srv.Close()
	waitForAPIServer(&rest.Config{Host: srv.URL}, logr.Discard())
	if got := calls.Load(); got != 3 {
		t.Fatalf("asked the apiserver %d times, want 3: until it answered, and no more", got)
	}
}
