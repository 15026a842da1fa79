module github.com/timerlane/timerlane

go 1.26.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/btree v1.8.2
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/crypto v0.58.0
	lukechampine.com/uint128 v1.3.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
