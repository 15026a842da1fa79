module github.com/timerlane/timerlane

go 1.26.0

require (
	github.com/tidwall/btree v1.8.2
	golang.org/x/crypto v0.58.0
)

require golang.org/x/sys v0.49.0 // indirect
