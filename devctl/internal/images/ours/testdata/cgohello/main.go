// Command cgohello is the smallest cgo program the image tests build: it calls the C library,
// so it is linked dynamically against it.
package main

// #include <stdlib.h>
import "C"

import "fmt"

var version = "unset"

func main() { fmt.Println("hello from C's abs:", C.abs(-42), version) }
