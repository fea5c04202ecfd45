// Package agent runs a model with tools over sessions (package
// host/session) and keeps each conversation's history through history
// providers: plugins served by package host, or native Go providers such as
// MemoryProvider. It owns the loop, the persistence modes (per run or per
// service call) and the conflict modes with service-managed conversations;
// the session stores are package host/store. The model interface and its clients are in
// host/agent/model, history bounds in host/agent/reducer.
//
// See persistence.md in this directory for the full configuration matrix.
package agent
