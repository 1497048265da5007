package httpapi

// consoleOIDC signs people in to the console through an OpenID Connect
// provider (authorization code with PKCE).
type consoleOIDC struct{}
