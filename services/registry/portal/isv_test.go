package portal_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell"
)

// built is an image as hdk leaves it: a layout folder packed as a tar,
// and the keys file of its sealed layers.
type built struct {
	tar  []byte
	keys []byte
}

// buildImage builds the reference image source under imageName (its
// image.yaml's, which the portal wants to be its repository's last part),
// seals it to the registry's platform key unless plain, and signs it into
// its layout with key unless nil, as hdk build, seal and sign do.
func (r *rig) buildImage(imageName, source string, plain bool, key *ecdsa.PrivateKey) built {
	r.t.Helper()
	return r.build(imageName, source, images.SmallFrameBytes, plain, key)
}

// buildImageSized is buildImage of a full-size, sealed image.
func (r *rig) buildImageSized(imageName, source string, key *ecdsa.PrivateKey) built {
	r.t.Helper()
	return r.build(imageName, source, images.FrameBytes, false, key)
}

var manifestName = regexp.MustCompile(`(?m)^name: .*$`)

func (r *rig) build(imageName, source string, frameBytes int, plain bool, key *ecdsa.PrivateKey) built {
	r.t.Helper()
	ctx := context.Background()
	src := r.t.TempDir()
	var s images.Source
	for _, x := range images.Sources {
		if x.Name == source {
			s = x
		}
	}
	for _, b := range s.Bitstreams {
		bit, err := b.Make(shell.PartVU9P, frameBytes)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, b.File), bit, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	y, err := images.Manifest(source)
	if err != nil {
		r.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "image.yaml"), manifestName.ReplaceAll(y, []byte("name: "+imageName)), 0o644)
	m, err := image.Load(filepath.Join(src, "image.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	img, err := image.Build(ctx, m)
	if err != nil {
		r.t.Fatal(err)
	}
	var out built
	if !plain {
		pem, err := os.ReadFile(filepath.Join(r.srv.Config().PlatformKeyDir, validation.RecipientPubFile))
		if err != nil {
			r.t.Fatal(err)
		}
		recipient, err := seal.ParsePublicKeyPEM(pem)
		if err != nil {
			r.t.Fatal(err)
		}
		sealed, keys, err := image.Seal(ctx, img, recipient)
		if err != nil {
			r.t.Fatal(err)
		}
		img = sealed
		var lines []map[string]string
		for _, k := range keys {
			wk, _ := k.Key.MarshalBinary()
			lines = append(lines, map[string]string{"chip": k.Chip.String(), "layer": k.Layer.String(), "plaintext": k.Plaintext.String(),
				"key_id": k.KeyID.String(), "wrapped_key": base64.StdEncoding.EncodeToString(wk)})
		}
		out.keys, _ = json.Marshal(lines)
	}
	dir := filepath.Join(r.t.TempDir(), "layout")
	if err := image.WriteLayout(dir, img, "1.0.0"); err != nil {
		r.t.Fatal(err)
	}
	if key != nil {
		d, _ := img.Digest()
		p, err := layout.FromPath(dir)
		if err != nil {
			r.t.Fatal(err)
		}
		ref, _ := name.NewDigest("local.invalid/acme/x@" + d.String())
		if err := sign.Sign(ctx, ref, key, sign.WithLayout(p)); err != nil {
			r.t.Fatal(err)
		}
	}
	out.tar = tarDir(r.t, dir)
	return out
}

// tarDir packs dir as `tar -cf x.tar -C parent layout` would.
func tarDir(t testing.TB, dir string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	base := filepath.Dir(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		info, _ := d.Info()
		h, _ := tar.FileInfoHeader(info, "")
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !d.IsDir() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return b.Bytes()
}

// isvKey registers a fresh signing key for user and returns it.
func (r *rig) isvKey(user string) *ecdsa.PrivateKey {
	r.t.Helper()
	key, err := sign.GenerateKey()
	if err != nil {
		r.t.Fatal(err)
	}
	pub, _ := sign.MarshalPublicKey(key.Public())
	r.api(user, http.MethodPost, "/keys", map[string]string{"public_key": string(pub)}, nil)
	return key
}

// upload posts the publish form as a browser without script does.
func (b *browser) upload(listing, version string, img built) (*http.Response, string) {
	b.t.Helper()
	_, page := b.get("/isv/publish")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("csrf", csrf(b.t, page))
	mw.WriteField("listing", listing)
	mw.WriteField("version", version)
	if img.keys != nil {
		w, _ := mw.CreateFormFile("keys", "layout.keys.json")
		w.Write(img.keys)
	}
	w, _ := mw.CreateFormFile("layout", "image.tar")
	w.Write(img.tar)
	mw.Close()
	return b.send(http.MethodPost, "/isv/publish", mw.FormDataContentType(), &body)
}

// awaitState polls the version page until validation ends.
func (b *browser) awaitState(listing, version string) string {
	b.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		_, page := b.get("/isv/listings/" + listing + "/versions/" + version)
		for _, s := range []string{"available", "failed"} {
			if strings.Contains(page, `Validation: <span class="state `+s+`">`) {
				return page
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.t.Fatalf("validation of %s did not end", version)
	return ""
}

func TestPublishFromTheBrowser(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("globex", auth.RoleISV)
	key := r.isvKey("acme")
	listing := r.listing("acme", "Dual DNN", "two chips", false)
	b := r.browser()
	b.signIn("acme")

	good := r.buildImage("dual-dnn", "alidnn-dual", false, key)
	resp, page := b.upload(listing, "1.0.0", good)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/isv/listings/"+listing+"/versions/1.0.0" {
		t.Fatalf("upload: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), errorOf(page))
	}
	page = b.awaitState(listing, "1.0.0")
	if !strings.Contains(page, `class="state available"`) {
		t.Fatalf("validation did not pass:\n%s", page)
	}
	// The registry holds the image, its signature and its keys, as after hdk push.
	vs, err := r.as("acme").Versions(t.Context(), listing, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.Items) != 1 || vs.Items[0].State != "available" {
		t.Fatalf("versions: %+v", vs.Items)
	}
	var refs struct {
		Manifests []struct{ ArtifactType string }
	}
	getJSON(t, r, "acme", "/v2/acme/dual-dnn/referrers/"+vs.Items[0].ManifestDigest, &refs)
	if len(refs.Manifests) != 1 || refs.Manifests[0].ArtifactType != image.KeysArtifactType {
		t.Fatalf("referrers of the image: %+v, want its keys artifact", refs.Manifests)
	}

	for name, c := range map[string]struct {
		img  built
		want string
		code int
	}{
		"tampered":  {tampered(good), "do not match its digest", http.StatusUnprocessableEntity},
		"unsigned":  {r.buildImage("dual-dnn", "loopback", true, nil), "not signed", http.StatusUnprocessableEntity},
		"no keys":   {built{tar: good.tar}, "The image is sealed", http.StatusUnprocessableEntity},
		"not a tar": {built{tar: []byte(strings.Repeat("not a tar ", 100))}, "The image was refused", http.StatusUnprocessableEntity},
	} {
		resp, page := b.upload(listing, "2.0.0", c.img)
		if resp.StatusCode != c.code || !strings.Contains(page, c.want) {
			t.Errorf("%s upload: %d, want %d saying %q", name, resp.StatusCode, c.code, c.want)
		}
	}
	if vs, err = r.as("acme").Versions(t.Context(), listing, nil); err != nil {
		t.Fatal(err)
	}
	if len(vs.Items) != 1 {
		t.Fatalf("refused uploads added versions: %+v", vs.Items)
	}
	// Another ISV cannot publish into acme's listing.
	other := r.browser()
	other.signIn("globex")
	r.isvKey("globex")
	if resp, _ := other.upload(listing, "3.0.0", good); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("globex uploading into acme's listing: %d, want 404", resp.StatusCode)
	}
	// A tenant is not let in at all.
	r.user("alice", auth.RoleTenant)
	tenant := r.browser()
	tenant.signIn("alice")
	if resp, _ := tenant.get("/isv/publish"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tenant on /isv/publish: %d, want 403", resp.StatusCode)
	}
}

// tampered flips a byte in the middle of the largest file of img's tar.
func tampered(img built) built {
	var largest []byte
	tr := tar.NewReader(bytes.NewReader(img.tar))
	for {
		if _, err := tr.Next(); err != nil {
			break
		}
		if data, _ := io.ReadAll(tr); len(data) > len(largest) {
			largest = data
		}
	}
	out := bytes.Clone(img.tar)
	out[bytes.Index(out, largest)+len(largest)/2] ^= 0xff
	return built{tar: out, keys: img.keys}
}

func getJSON(t *testing.T, r *rig, user, path string, out any) {
	t.Helper()
	tok := registryToken(t, r, user, path)
	req, _ := http.NewRequest(http.MethodGet, r.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	json.NewDecoder(resp.Body).Decode(out)
}

func registryToken(t *testing.T, r *rig, user, path string) string {
	repo := strings.Join(strings.Split(strings.TrimPrefix(path, "/v2/"), "/")[:2], "/")
	q := url.Values{"service": {"faas-registry"}, "scope": {"repository:" + repo + ":pull"}}
	req, _ := http.NewRequest(http.MethodGet, r.url+"/auth/token?"+q.Encode(), nil)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&tok)
	return tok.Token
}
