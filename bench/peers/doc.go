// Package peers compares markov with github.com/cloudwego/eino on the same
// workloads: a zero-latency model that returns canned replies, the same
// 4-message history blocks, and one lookup_order tool whose input each
// library checks its own way. It is a module of its own so that the
// library never depends on eino; README.md says how to run it and how each
// workload maps onto the two libraries.
package peers
