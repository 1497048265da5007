// Package relevance holds the relevance test set of operation search: the
// queries people type over four real API descriptions of different kinds,
// each with the operation(s) a person would expect, and the test that holds
// the ranking to its figures. It has no code of its own.
package relevance
