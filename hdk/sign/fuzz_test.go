package sign

import (
	"bytes"
	"testing"
)

func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		`{"critical":{"identity":{"docker-reference":"index.docker.io/namespace/image"},"image":{"docker-manifest-digest":"sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec"},"type":"cosign container image signature"},"optional":null}`,
		`{"critical":{"identity":{"docker-reference":"r"},"image":{"docker-manifest-digest":"sha256:00"},"type":"cosign container image signature"},"optional":{"isv":"acme","n":1.5e3,"l":[1,{"x":null}]}}`,
		`{"critical":{"type":"cosign container image signature"}}`,
		`{"critical":{"image":{"docker-manifest-digest":"sha256:00"},"type":"cosign container image signature"}} {}`,
		`null`, `[]`, `{}`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePayload(b)
		if err != nil {
			return
		}
		if p.Critical.Type != PayloadType || p.Critical.Image.DockerManifestDigest == "" {
			t.Fatalf("ParsePayload accepted %+v", p)
		}
		// What parses re-encodes to something that parses to the same encoding.
		enc, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		p2, err := ParsePayload(enc)
		if err != nil {
			t.Fatalf("re-encoded payload %s does not parse: %v", enc, err)
		}
		enc2, err := p2.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}
