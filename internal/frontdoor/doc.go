// Package frontdoor is the HTTP plumbing every front door shares (REST, A2A,
// MCP, the console, the run gateway): the error-returning handler and its
// adapter, the problem writer (the one place an error response is written),
// JSON writing, JSON decoding with limits, server-sent events, and the
// request's identity and audit information that the middleware fills in
// and the audit record is made from.
//
// It imports domain and leaf packages only (problem, auth and the like),
// never a front door (httpapi, the console, A2A, MCP) nor a presentation
// package (web): a front door that needs something of its own in the
// shared path sets a hook, as the console's routes set Info.ProblemPage
// and a signed page's refused link is a PageError.
package frontdoor
