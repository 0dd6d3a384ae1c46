package config

import "testing"

func TestAdminIsOffByDefaultAndServesBeyondLoopbackOnlyWhenAllowed(t *testing.T) {
	const agents = "agents:\n  - name: a\n    command: /bin/a\n"
	cfg, err := Parse([]byte(agents), "config.yaml", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin != (Admin{}) {
		t.Errorf("admin defaults to %+v, want off", cfg.Admin)
	}
	for _, listen := range []string{`"127.0.0.1:9091"`, `"localhost:9091"`, `"[::1]:9091"`} {
		if _, err := Parse([]byte(agents+"admin: {listen: "+listen+"}\n"), "config.yaml", envOf(nil)); err != nil {
			t.Errorf("admin.listen %s: %v", listen, err)
		}
	}
	cfg, err = Parse([]byte(agents+"admin: {listen: \"0.0.0.0:9091\", allow_remote: true}\n"), "config.yaml", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Admin{Listen: "0.0.0.0:9091", AllowRemote: true}); cfg.Admin != want {
		t.Errorf("admin = %+v, want %+v", cfg.Admin, want)
	}
}
