// Command broken does not compile: the image tests check that the compiler's message reaches
// the user.
package main

func main() {
	var n int = "not a number"
	_ = n
}
