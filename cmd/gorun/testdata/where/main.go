// Command where prints its rank and the path it runs from.
package main

import (
	"fmt"
	"os"
)

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", os.Getenv("GORUN_RANK"), exe)
}
