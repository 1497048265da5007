// Package relevance holds the relevance test set of operation search: the
// queries people type over four real API descriptions of different kinds,
// each with the operation(s) a person would expect, and the test that holds
// the ranking to its figures; and Import, which reads one of those
// documents with the importer of its kind, for the benchmarks too.
package relevance
