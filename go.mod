module github.com/locus-go/locus

go 1.25.0

require (
	github.com/bytedance/gopkg v0.1.4
	github.com/libp2p/go-buffer-pool v0.1.0
	github.com/puzpuzpuz/xsync/v3 v3.5.1
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.47.0
	golang.org/x/term v0.45.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
