// Command tensorboard-standin stands in for TensorBoard where its image cannot be pulled (the
// offline kind clusters of `make e2e`). It is not TensorBoard: it takes the command line the
// operator gives TensorBoard (--logdir, --host, --port), and serves over HTTP what TensorBoard
// would read, the event files under the log directory, so that a job's TensorBoard Deployment,
// Service, status and proxy URL can be checked end to end with a server that answers.
//
//	GET /           an HTML page that says it is a stand-in and lists the event files
//	GET /data/runs  the runs (folders holding event files, relative to --logdir) as JSON, as
//	                TensorBoard's own endpoint of that name
//	GET /data/files the event files as JSON: path, size, modification time
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// eventFile is one file of TensorBoard events, found under the log directory.
type eventFile struct {
	Path     string    `json:"path"` // relative to --logdir
	Run      string    `json:"run"`  // its folder, relative to --logdir; "." for the top
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// eventFiles lists the files under dir whose name marks them as TensorBoard's
// (events.out.tfevents.*), sorted by path. A log directory not there yet is empty: the
// trainer creates it when it writes its first event.
func eventFiles(dir string) ([]eventFile, error) {
	var files []eventFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() || !strings.Contains(d.Name(), "tfevents") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, eventFile{Path: rel, Run: filepath.Dir(rel), Size: info.Size(), Modified: info.ModTime().UTC()})
		return nil
	})
	return files, err
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<title>TensorBoard stand-in</title>
<h1>TensorBoard stand-in (mlkube)</h1>
<p>This is not TensorBoard: mlkube's end-to-end tests run it where TensorBoard's image cannot be
pulled. It lists the event files TensorBoard would read from <code>{{.Dir}}</code>.</p>
<table>
<tr><th>event file</th><th>run</th><th>bytes</th><th>modified</th></tr>
{{range .Files}}<tr><td>{{.Path}}</td><td>{{.Run}}</td><td>{{.Size}}</td><td>{{.Modified.Format "2006-01-02T15:04:05Z"}}</td></tr>
{{else}}<tr><td colspan="4">no event files yet</td></tr>
{{end}}</table>
`))

func handler(dir string) http.Handler {
	mux := http.NewServeMux()
	list := func(w http.ResponseWriter) ([]eventFile, bool) {
		files, err := eventFiles(dir)
		if err != nil {
			http.Error(w, fmt.Sprintf("reading the log directory %s: %v", dir, err), http.StatusInternalServerError)
			return nil, false
		}
		return files, true
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if files, ok := list(w); ok {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = page.Execute(w, struct {
				Dir   string
				Files []eventFile
			}{dir, files})
		}
	})
	mux.HandleFunc("GET /data/runs", func(w http.ResponseWriter, r *http.Request) {
		if files, ok := list(w); ok {
			runs := []string{}
			for _, f := range files {
				if !slices.Contains(runs, f.Run) {
					runs = append(runs, f.Run)
				}
			}
			writeJSON(w, runs)
		}
	})
	mux.HandleFunc("GET /data/files", func(w http.ResponseWriter, r *http.Request) {
		if files, ok := list(w); ok {
			if files == nil {
				files = []eventFile{}
			}
			writeJSON(w, files)
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func main() {
	fs := flag.NewFlagSet("tensorboard", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tensorboard --logdir DIR [--host 0.0.0.0] [--port 6006]\n\nmlkube's TensorBoard stand-in: serves the list of event files under DIR, not TensorBoard.\n\n")
		fs.PrintDefaults()
	}
	dir := fs.String("logdir", "", "the log directory whose event files are listed (required)")
	host := fs.String("host", "0.0.0.0", "address to listen on")
	port := fs.Int("port", 6006, "port to listen on")
	_ = fs.Parse(os.Args[1:])
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "tensorboard: --logdir is required")
		fs.Usage()
		os.Exit(2)
	}
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	log.Printf("TensorBoard stand-in serving the event files of %s at http://%s/", *dir, addr)
	srv := &http.Server{Addr: addr, Handler: handler(*dir), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
