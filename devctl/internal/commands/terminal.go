package commands

import (
	"io"
	"os"
)

// colorful says whether w is a terminal that takes colours: a character device, with neither
// NO_COLOR set nor TERM=dumb.
func colorful(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
