package main

import (
	"fmt"
	"io"
)

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "demo: not built yet")
	return 1
}
