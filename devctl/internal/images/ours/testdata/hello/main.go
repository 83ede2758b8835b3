// Command hello is the smallest program the image tests build.
package main

import "fmt"

var version = "unset"

func main() { fmt.Println("hello", version) }
