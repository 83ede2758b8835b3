package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The stand-in lists the event files under its log directory, and only those, by run.
func TestListsEventFiles(t *testing.T) {
	dir := t.TempDir()
	for path, data := range map[string]string{
		"events.out.tfevents.1.master":      "top",
		"eval/events.out.tfevents.2.master": "evaluation",
		"eval/checkpoint":                   "not an event file",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(handler(dir))
	defer srv.Close()

	var runs []string
	getJSON(t, srv.URL+"/data/runs", &runs)
	if !reflect.DeepEqual(runs, []string{"eval", "."}) {
		t.Errorf("runs %v", runs)
	}
	var files []eventFile
	getJSON(t, srv.URL+"/data/files", &files)
	if len(files) != 2 || files[0].Path != "eval/events.out.tfevents.2.master" || files[0].Size != int64(len("evaluation")) || files[1].Path != "events.out.tfevents.1.master" {
		t.Errorf("files %+v", files)
	}
	page := get(t, srv.URL+"/")
	for _, want := range []string{"TensorBoard stand-in", "This is not TensorBoard", "eval/events.out.tfevents.2.master"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "checkpoint") {
		t.Errorf("the page lists a file that holds no events:\n%s", page)
	}
}

// Before the trainer writes anything the log directory may not exist: no runs, no error.
func TestNoLogDirectoryYet(t *testing.T) {
	srv := httptest.NewServer(handler(filepath.Join(t.TempDir(), "not-yet")))
	defer srv.Close()
	var files []eventFile
	getJSON(t, srv.URL+"/data/files", &files)
	if files == nil || len(files) != 0 {
		t.Errorf("files %+v, want an empty list", files)
	}
	if page := get(t, srv.URL+"/"); !strings.Contains(page, "no event files yet") {
		t.Errorf("page:\n%s", page)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, url)), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
