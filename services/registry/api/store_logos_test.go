package api

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// TestStoreLogosAndDocs: the store keeps the PNG it is given (never
// another), audits each change, answers a logo to the callers who may
// see the listing and tells whether anyone may, and refuses the docs of a
// version that is not there.
func TestStoreLogosAndDocs(t *testing.T) {
	ctx := context.Background()
	pool := testenv.RegistryDB(t)
	as, err := auth.NewStore(pool, auth.WithParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}))
	if err != nil {
		t.Fatal(err)
	}
	st := &store{db: pool, meta: meta.New(pool), accounts: as, catalogIdx: &catalogIndex{db: pool}}
	who := func(name string, role auth.Role) *principal {
		a, err := as.Create(ctx, name, role, "pw-"+name)
		if err != nil {
			t.Fatal(err)
		}
		return &principal{Account: a}
	}
	acme, zeta, tenant := who("acme", auth.RoleISV), who("zeta", auth.RoleISV), who("t1", auth.RoleTenant)
	name, vis := "fft", "public"
	l, err := st.createListing(ctx, acme, "acme/fft", registryapi.ListingFields{Name: &name, Visibility: &vis})
	if err != nil {
		t.Fatal(err)
	}
	if l.Category != "other" || l.LogoDigest != "" {
		t.Fatalf("new listing: category %q, logo %q; want other and none", l.Category, l.LogoDigest)
	}

	var src bytes.Buffer
	if err := png.Encode(&src, image.NewGray(image.Rect(0, 0, 300, 60))); err != nil {
		t.Fatal(err)
	}
	lg, err := decodeLogo("image/png", src.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if lg.width != 256 || lg.height != 51 {
		t.Fatalf("300x60 drawn as %dx%d, want 256x51", lg.width, lg.height)
	}
	if _, err := st.setLogo(ctx, zeta, l.ID, lg); !errors.Is(err, ErrNotFound) {
		t.Fatalf("zeta sets acme's logo: %v, want not found", err)
	}
	got, err := st.setLogo(ctx, acme, l.ID, lg)
	if err != nil || got.LogoDigest != lg.digest {
		t.Fatalf("setLogo: %+v %v", got, err)
	}
	var stored []byte
	var audits int
	if err := pool.QueryRow(ctx, `select png, (select count(*) from audit_log where action = 'listing.logo.set' and target_id = $1)
		from listing_logos where listing_id = $1::uuid`, l.ID).Scan(&stored, &audits); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, lg.png) || bytes.Equal(stored, src.Bytes()) || audits != 1 {
		t.Fatalf("stored %d bytes (the PNG made: %v, the upload: %v), %d audit rows", len(stored),
			bytes.Equal(stored, lg.png), bytes.Equal(stored, src.Bytes()), audits)
	}

	for _, c := range []struct {
		p          *principal
		ok, public bool
	}{{acme, true, false}, {nil, false, false}, {tenant, false, false}, {zeta, false, false}} {
		_, public, err := st.getLogo(ctx, c.p, l.ID)
		if (err == nil) != c.ok || public != c.public || err != nil && !errors.Is(err, ErrNotFound) {
			t.Errorf("getLogo of a draft as %v: public %v, %v", c.p, public, err)
		}
	}
	if _, err := st.setPublished(ctx, acme, l.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, public, err := st.getLogo(ctx, nil, l.ID); err != nil || !public {
		t.Fatalf("getLogo of a published public listing, anonymous: public %v, %v", public, err)
	}

	if err := st.deleteLogo(ctx, acme, l.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.deleteLogo(ctx, acme, l.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting no logo: %v, want not found", err)
	}
	if _, err := st.setDocs(ctx, acme, l.ID, "v1", "# Hi"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("docs of a version that is not there: %v, want not found", err)
	}
	if _, err := st.getDocs(ctx, tenant, l.ID, "v1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("docs of a version that is not there: %v, want not found", err)
	}
}
