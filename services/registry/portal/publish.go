package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/publish"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// PublishPath is where browsers upload images; the registry lets its body
// past the general request size limit (Config.MaxUploadBytes applies).
const PublishPath = "/isv/publish"

type publishPage struct {
	Listings []registryapi.Listing
	Listing  string // selected listing id
	Version  string
	Error    string
	Host     string
	Max      int64
}

func (publishPage) title() string { return "Publish a version" }
func (publishPage) nav() string   { return "isv" }

func (p *Portal) publishForm(w http.ResponseWriter, r *http.Request) {
	p.showPublish(w, r, http.StatusOK, publishPage{Listing: r.URL.Query().Get("listing")})
}

func (p *Portal) showPublish(w http.ResponseWriter, r *http.Request, status int, pg publishPage) {
	ls, err := p.ownListings(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	// A listing named but not among the ISV's is refused outright: shown
	// unselected, the form would preselect another and upload into it.
	if pg.Listing != "" && !slices.ContainsFunc(ls, func(l registryapi.Listing) bool { return l.ID == pg.Listing }) {
		p.fail(w, r, notYours())
		return
	}
	pg.Listings, pg.Host, pg.Max = ls, r.Host, p.cfg.MaxUploadBytes
	p.render(w, r, status, pagePublish, pg)
}

// refusal is an upload the portal refuses, with the reason shown.
type refusal struct {
	status int
	msg    string
}

func (e *refusal) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &refusal{status, fmt.Sprintf(format, args...)}
}

var formVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)

// publishUpload ingests an OCI image layout tar uploaded from the browser
// as `hdk push` would push it (package publish, through the registry's own
// /v2 handler and authorization), attaches it to the listing as a version
// and sends the browser to the version's page, which follows validation.
// The multipart body is streamed: the layout goes to a temporary folder as
// it arrives, never whole into memory.
func (p *Portal) publishUpload(w http.ResponseWriter, r *http.Request) {
	acct := accountOf(r)
	pg := publishPage{}
	err := p.ingest(w, r, *acct, &pg)
	var rf *refusal
	switch {
	case err == nil:
		http.Redirect(w, r, "/isv/listings/"+url.PathEscape(pg.Listing)+"/versions/"+url.PathEscape(pg.Version), http.StatusSeeOther)
	case errors.As(err, &rf):
		pg.Error = rf.msg
		p.showPublish(w, r, rf.status, pg)
	default:
		p.fail(w, r, err)
	}
}

func (p *Portal) ingest(w http.ResponseWriter, r *http.Request, acct auth.Account, pg *publishPage) error {
	release, ok := p.uploads.acquire(acct.ID)
	if !ok {
		return refuse(http.StatusTooManyRequests, "Another upload is in progress; wait for it to finish.")
	}
	defer release()
	r.Body = http.MaxBytesReader(w, r.Body, p.cfg.MaxUploadBytes+1<<20)
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return refuse(http.StatusBadRequest, "The upload must be a multipart form.")
	}
	dir, err := os.MkdirTemp(p.cfg.UploadDir, "faas-publish-")
	if err != nil {
		return fmt.Errorf("portal: upload folder: %w", err)
	}
	defer os.RemoveAll(dir)
	keys, gotLayout, err := p.readUpload(r, multipart.NewReader(r.Body, params["boundary"]), acct, pg, dir)
	if err != nil {
		return err
	}
	if err := formFields(pg); err != nil {
		return err
	}
	if !gotLayout {
		return refuse(http.StatusUnprocessableEntity, "Choose the image: a .tar of the OCI image layout hdk build wrote.")
	}
	return p.publishLayout(r.Context(), acct, pg, dir, keys)
}

// errStaleForm refuses a form without a valid CSRF token.
var errStaleForm = refuse(http.StatusForbidden, "This form is out of date or did not come from this site. Reload the page and try again.")

// readUpload reads the form's parts in order: the small fields into pg,
// the keys file, and the image layout, unpacked into dir as it arrives.
func (p *Portal) readUpload(r *http.Request, mr *multipart.Reader, acct auth.Account, pg *publishPage, dir string) (keys []byte, gotLayout bool, _ error) {
	csrfOK := r.Header.Get("X-CSRF-Token") != "" // checked by withSession
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return keys, gotLayout, nil
		}
		if err != nil {
			return nil, false, bodyErr(err)
		}
		field := part.FormName()
		if !csrfOK && field != "csrf" {
			return nil, false, errStaleForm
		}
		switch field {
		case "csrf", "listing", "version":
			v, err := io.ReadAll(io.LimitReader(part, 1024))
			if err != nil {
				return nil, false, bodyErr(err)
			}
			switch field {
			case "csrf":
				if csrfOK = csrfOK || sessionOf(r).validCSRF(string(v)); !csrfOK {
					return nil, false, errStaleForm
				}
			case "listing":
				pg.Listing = strings.TrimSpace(string(v))
			case "version":
				pg.Version = strings.TrimSpace(string(v))
			}
		case "keys":
			b, err := io.ReadAll(io.LimitReader(part, 1<<20+1))
			if err != nil {
				return nil, false, bodyErr(err)
			}
			if len(b) > 1<<20 {
				return nil, false, refuse(http.StatusRequestEntityTooLarge, "The keys file is larger than 1 MiB: is it the layout.keys.json hdk seal wrote?")
			}
			if len(b) > 0 {
				keys = b
			}
		case "layout":
			if part.FileName() == "" {
				continue
			}
			gotLayout = true
			if err := p.receiveLayout(r.Context(), acct, pg, part, dir); err != nil {
				return nil, false, err
			}
		default:
			return nil, false, refuse(http.StatusBadRequest, "Unexpected form field %q.", field)
		}
	}
}

// receiveLayout unpacks the image layout tar into dir, streaming its
// large blobs into the registry.
func (p *Portal) receiveLayout(ctx context.Context, acct auth.Account, pg *publishPage, part io.Reader, dir string) error {
	// Whatever refuses the version refuses it before a byte of the image
	// is read (the form sends listing and version first); the registry
	// checks the tag again when it stores the manifest.
	l, err := p.versionFree(ctx, acct, pg)
	if err != nil {
		return err
	}
	// Large blobs go straight into the registry as they arrive: hashed
	// once, by the registry, and never written to this disk.
	tok, err := p.cfg.Tokens(ctx, acct, l.Repository, []string{"pull", "push"})
	if err != nil {
		return err
	}
	opts := publish.Options{MaxBytes: p.cfg.MaxUploadBytes, StreamMin: streamMin,
		Stream: func(ctx context.Context, digest string, size int64, body io.Reader) error {
			return p.uploadBlob(ctx, l.Repository, tok, digest, size, body)
		}}
	err = publish.Untar(ctx, part, dir, opts)
	var mbe *http.MaxBytesError
	var rf *refusal
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rf):
		return rf
	case errors.As(err, &mbe):
		return bodyErr(err)
	case errors.Is(err, publish.ErrLayoutTar):
		return refuse(http.StatusUnprocessableEntity, "The image was refused: %s.", strings.TrimPrefix(err.Error(), "publish: "))
	}
	return err
}

// publishLayout checks the unpacked layout (signed, named for the
// repository), pushes it as the version's tag and adds the version.
func (p *Portal) publishLayout(ctx context.Context, acct auth.Account, pg *publishPage, dir string, keys []byte) error {
	l, err := p.ownListing(ctx, acct, pg.Listing)
	if err != nil {
		return err
	}
	signed, err := publish.Signed(dir)
	if err != nil {
		return refuse(http.StatusUnprocessableEntity, "The image was refused: %s.", strings.TrimPrefix(err.Error(), "image: "))
	}
	if !signed {
		return refuse(http.StatusUnprocessableEntity, "The image is not signed: sign the layout with hdk sign --key isv.key before uploading it.")
	}
	if err := sameName(dir, l.Repository); err != nil {
		return err
	}
	digest, err := p.push(ctx, acct, dir, l.Repository, pg.Version, keys)
	if err != nil {
		return err
	}
	_, err = p.apiAs(&acct).AddVersion(ctx, l.ID, registryapi.NewVersion{Version: pg.Version, Digest: digest})
	return err
}

// formFields checks the listing and version fields of the form.
func formFields(pg *publishPage) error {
	switch {
	case pg.Listing == "":
		return refuse(http.StatusUnprocessableEntity, "Choose the listing the version belongs to.")
	case !formVersion.MatchString(pg.Version):
		return refuse(http.StatusUnprocessableEntity, "Version: 1 to 128 characters of letters, digits and . _ + -, starting with a letter or digit.")
	}
	return nil
}

// versionFree returns the listing an upload of pg.Version goes to, or the
// upload's refusal: fields missing or malformed, a listing not acct's, or
// a version whose tag may no longer move (it is a version already, or a
// tag rule holds it). The image is unknown yet, so even its own image is
// refused then: the listing page adds a version from an image pushed
// before.
func (p *Portal) versionFree(ctx context.Context, acct auth.Account, pg *publishPage) (registryapi.Listing, error) {
	if err := formFields(pg); err != nil {
		return registryapi.Listing{}, err
	}
	l, err := p.ownListing(ctx, acct, pg.Listing)
	if err != nil {
		return l, err
	}
	tag, err := p.apiAs(&acct).Tag(ctx, l.ID, pg.Version)
	if err != nil {
		return l, err
	}
	if tag.Immutable {
		return l, refuse(http.StatusConflict, "Version %s cannot be uploaded: %s.", pg.Version, tag.Reason)
	}
	return l, nil
}

// sameName refuses the image of the layout at dir unless its own name
// (image.yaml's name, in its config) is the last part of repo: an image
// uploaded into another's listing by mistake would be sold under it.
func sameName(dir, repo string) error {
	img, err := image.ReadLayout(dir)
	var cfg image.Config
	if err == nil {
		cfg, err = image.ConfigOf(img)
	}
	if err != nil {
		return refuse(http.StatusUnprocessableEntity, "The image was refused: %s.", strings.TrimPrefix(err.Error(), "image: "))
	}
	if want := path.Base(repo); cfg.Name != want {
		return refuse(http.StatusUnprocessableEntity, "The image is named %q (the name in its image.yaml), but this listing's repository is %s: "+
			"upload it to the listing of repository …/%s, or build it with name: %s.", cfg.Name, repo, cfg.Name, want)
	}
	return nil
}

// streamMin is the size from which an uploaded blob is streamed into the
// registry rather than unpacked: the bitstream layers, not the manifests
// and configs that publish.Layout reads.
const streamMin = 1 << 20

// ownListing returns acct's listing id, or a refusal shown on the form.
func (p *Portal) ownListing(ctx context.Context, acct auth.Account, id string) (registryapi.Listing, error) {
	l, err := p.ownedListing(ctx, acct, id)
	if ae, ok := apiRefusal(err); ok && ae.Status == http.StatusNotFound || err == nil && l.Repository == "" {
		return l, refuse(http.StatusNotFound, "No such listing of yours.")
	}
	return l, err
}

// uploadBlob pushes one blob into repo through the registry's /v2 handler
// in one monolithic POST, which checks its digest.
func (p *Portal) uploadBlob(ctx context.Context, repo, token, digest string, size int64, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+inprocRegistry+"/v2/"+repo+"/blobs/uploads/?digest="+url.QueryEscape(digest), body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := p.registryTransport().RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		return nil
	}
	var env struct {
		Errors []struct{ Code, Message string } `json:"errors"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	for _, e := range env.Errors {
		if e.Code == "DIGEST_INVALID" {
			return refuse(http.StatusUnprocessableEntity, "The image was refused: blob %s: its bytes do not match its digest (the file was altered).", digest)
		}
	}
	msg := http.StatusText(resp.StatusCode)
	if len(env.Errors) > 0 {
		msg = env.Errors[0].Message
	}
	return refuse(resp.StatusCode, "The registry refused blob %s: %s.", digest, msg)
}

// push publishes the layout in dir as repo:version through the registry's
// /v2 handler, with a token the registry's policy grants acct.
func (p *Portal) push(ctx context.Context, acct auth.Account, dir, repo, version string, keys []byte) (string, error) {
	tok, err := p.cfg.Tokens(ctx, acct, repo, []string{"pull", "push"})
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(inprocRegistry + "/" + repo + ":" + version)
	if err != nil {
		return "", refuse(http.StatusUnprocessableEntity, "Version: %v.", err)
	}
	res, err := publish.Layout(ctx, dir, ref, keys, nil,
		remote.WithTransport(p.registryTransport()), remote.WithAuth(&authn.Bearer{Token: tok}))
	var te *transport.Error
	switch {
	case errors.Is(err, publish.ErrKeysMissing):
		return "", refuse(http.StatusUnprocessableEntity, "The image is sealed: add the keys file hdk seal wrote (layout.keys.json) so the registry can release its keys to entitled nodes.")
	case errors.As(err, &te):
		return "", refuse(te.StatusCode, "The registry refused the image: %s.", registryMessage(te))
	case err != nil:
		return "", refuse(http.StatusUnprocessableEntity, "The image was refused: %s.", strings.TrimPrefix(err.Error(), "publish: "))
	}
	return res.Digest.String(), nil
}

func registryMessage(te *transport.Error) string {
	var msgs []string
	for _, d := range te.Errors {
		msgs = append(msgs, d.Message)
	}
	if len(msgs) == 0 {
		return http.StatusText(te.StatusCode)
	}
	return strings.Join(msgs, "; ")
}

// bodyErr turns a failure to read the upload into a refusal.
func bodyErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return refuse(http.StatusRequestEntityTooLarge, "The upload is larger than %d bytes.", mbe.Limit)
	}
	return refuse(http.StatusBadRequest, "The upload was cut off or malformed: %v.", err)
}
