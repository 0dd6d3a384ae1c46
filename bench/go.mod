module github.com/acpgate/acpgate/bench

go 1.26.0

require (
	github.com/acpgate/acpgate v0.0.0-00010101000000-000000000000
	github.com/coder/acp-go-sdk v0.13.0
	github.com/jackc/pgx/v5 v5.13.0
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
	golang.org/x/sys v0.50.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/landlock-lsm/go-landlock v0.11.2 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
)

replace github.com/acpgate/acpgate => ../
