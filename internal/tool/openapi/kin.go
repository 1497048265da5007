package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

// errNoExternalRefs refuses every read kin-openapi's loader attempts.
var errNoExternalRefs = errors.New("references outside the document are not followed")

// safeLoader is a kin-openapi loader that never reads a file or a URL: a
// custom ReadFromURIFunc owns the access policy, and this one refuses all.
func safeLoader(ctx context.Context) *openapi3.Loader {
	l := openapi3.NewLoader()
	l.Context = ctx
	l.IsExternalRefsAllowed = false
	l.ReadFromURIFunc = func(*openapi3.Loader, *url.URL) ([]byte, error) { return nil, errNoExternalRefs }
	return l
}

// jsonOf returns the document as JSON: the input itself when it was JSON.
func jsonOf(data []byte, isJSON bool, root map[string]any) ([]byte, error) {
	if isJSON {
		return data, nil
	}
	b, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("re-encode document as json: %w", err)
	}
	return b, nil
}

// swaggerForValidation converts a Swagger 2.0 document to kin-openapi's
// OpenAPI 3.0 model with its openapi2conv, for the validator only: the
// importer reads the document's own tree, rewritten by fromSwagger.
func swaggerForValidation(ctx context.Context, data []byte, isJSON bool, root map[string]any) (doc3 *openapi3.T, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc3, err = nil, errors.New("swagger 2.0: the document could not be converted")
		}
	}()
	raw, err := jsonOf(data, isJSON, root)
	if err != nil {
		return nil, err
	}
	var doc2 openapi2.T
	if err := json.Unmarshal(raw, &doc2); err != nil {
		return nil, fmt.Errorf("swagger 2.0: %w", err)
	}
	doc3, err = openapi2conv.ToV3WithLoader(&doc2, safeLoader(ctx), nil)
	if err != nil {
		return nil, fmt.Errorf("swagger 2.0: %w", err)
	}
	return doc3, nil
}

// validate3 runs kin-openapi's validator over an OpenAPI 3.x document and
// adds what it finds to w.
func (im *Importer) validate3(ctx context.Context, data []byte, isJSON bool, w *warnings) {
	defer func() {
		if r := recover(); r != nil {
			w.add("validation stopped early: the validator failed on this document")
		}
	}()
	// A YAML document is parsed again: indexing has pruned its tree.
	var root map[string]any
	var err error
	if !isJSON {
		root, _, err = parse(data)
	}
	var raw []byte
	if err == nil {
		raw, err = jsonOf(data, isJSON, root)
	}
	if err != nil {
		w.add("validation skipped: %v", err)
		return
	}
	var doc openapi3.T
	if err := json.Unmarshal(raw, &doc); err != nil {
		w.add("validation: %s", kinMessage(err))
		return
	}
	if err := safeLoader(ctx).ResolveRefsIn(&doc, nil); err != nil {
		w.add("validation: %s", kinMessage(err))
		return
	}
	validateDoc(ctx, &doc, w)
}

// validateDoc adds the findings of openapi3.T.Validate to w. Examples are
// not validated: real documents carry many stale ones.
func validateDoc(ctx context.Context, doc *openapi3.T, w *warnings) {
	defer func() {
		if r := recover(); r != nil {
			w.add("validation stopped early: the validator failed on this document")
		}
	}()
	err := doc.Validate(ctx, openapi3.DisableExamplesValidation(), openapi3.EnableMultiError())
	var walk func(error)
	walk = func(err error) {
		if me, ok := err.(openapi3.MultiError); ok {
			for _, e := range me {
				walk(e)
			}
			return
		}
		w.add("validation: %s", kinMessage(err))
	}
	if err != nil {
		walk(err)
	}
}

// kinMessage shortens a kin-openapi error to one line.
func kinMessage(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(msg) > 500 {
		msg = strings.ToValidUTF8(msg[:500], "") + "…"
	}
	return msg
}
