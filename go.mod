module github.com/acpgate/acpgate

go 1.26.0

require (
	github.com/coder/acp-go-sdk v0.13.0
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.48.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/kr/text v0.2.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
