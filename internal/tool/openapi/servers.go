package openapi

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

var serverVar = regexp.MustCompile(`\{([^{}]+)\}`)

// baseURL3 is the first server's URL of an OpenAPI 3.x document, its
// variables replaced by their defaults, resolved against the document's own
// URL when relative. With no servers, the default server "/" applies.
func baseURL3(root map[string]any, srcURL string, warn func(string, ...any)) string {
	servers, _ := root["servers"].([]any)
	if len(servers) == 0 {
		return absolute("/", srcURL, nil)
	}
	server, _ := servers[0].(map[string]any)
	raw, _ := server["url"].(string)
	if raw == "" {
		warn("servers[0]: no url")
		return ""
	}
	vars, _ := server["variables"].(map[string]any)
	raw = serverVar.ReplaceAllStringFunc(raw, func(m string) string {
		name := m[1 : len(m)-1]
		v, _ := vars[name].(map[string]any)
		def, ok := v["default"].(string)
		if !ok {
			warn("servers[0]: variable %q has no default", name)
			return m
		}
		return def
	})
	return absolute(raw, srcURL, warn)
}

// baseURL2 is the base URL of a Swagger 2.0 document: scheme (https when
// listed, else the first listed, else the document's own, else https), host
// (else the document's own host) and basePath.
func baseURL2(root map[string]any, srcURL string, warn func(string, ...any)) string {
	host, _ := root["host"].(string)
	basePath, _ := root["basePath"].(string)
	var schemes []string
	list, _ := root["schemes"].([]any)
	for _, s := range list {
		if s, ok := s.(string); ok {
			schemes = append(schemes, strings.ToLower(s))
		}
	}
	if host == "" {
		return absolute("/"+strings.TrimPrefix(basePath, "/"), srcURL, warn)
	}
	scheme := "https"
	switch {
	case slices.Contains(schemes, "https"):
	case len(schemes) > 0:
		scheme = schemes[0]
	default:
		if u, err := url.Parse(srcURL); err == nil && u.Scheme != "" {
			scheme = u.Scheme
		}
	}
	u := &url.URL{Scheme: scheme, Host: host, Path: "/" + strings.TrimPrefix(basePath, "/")}
	return strings.TrimRight(u.String(), "/")
}

// absolute resolves ref against base, without a trailing slash; "" when it
// stays relative (warn, if not nil, says so) or does not parse.
func absolute(ref, base string, warn func(string, ...any)) string {
	u, err := url.Parse(ref)
	if err != nil {
		if warn != nil {
			warn("server URL %q does not parse", ref)
		}
		return ""
	}
	if !u.IsAbs() {
		b, err := url.Parse(base)
		if base == "" || err != nil || !b.IsAbs() {
			if warn != nil {
				warn("server URL %q is relative and the document has no URL to resolve it against; set endpoint_url", ref)
			}
			return ""
		}
		u = b.ResolveReference(u)
	}
	return strings.TrimRight(u.String(), "/")
}

// tokenURL is the token URL of the first oauth2 security scheme (by name)
// with a client-credentials flow, resolved against the base URL when
// relative.
func tokenURL(root map[string]any, baseURL, srcURL string) string {
	components, _ := root["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	for _, name := range sortedKeys(schemes) {
		s := resolve(root, schemes[name])
		if t, _ := s["type"].(string); t != "oauth2" {
			continue
		}
		flows, _ := s["flows"].(map[string]any)
		cc, _ := flows["clientCredentials"].(map[string]any)
		raw, _ := cc["tokenUrl"].(string)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if u.IsAbs() {
			return u.String()
		}
		for _, base := range []string{baseURL + "/", srcURL} {
			if b, err := url.Parse(base); err == nil && b.IsAbs() {
				return b.ResolveReference(u).String()
			}
		}
	}
	return ""
}
