// Command nobuild does not compile, on purpose.
package main

func main() {
	undefinedThing()
}
