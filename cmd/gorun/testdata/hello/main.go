// Command hello prints its rank from the environment gorun sets.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("hello from rank %s of %s\n", os.Getenv("GORUN_RANK"), os.Getenv("GORUN_SIZE"))
}
