// Package peer serves a wasmhist provider as a hashicorp/go-plugin plugin
// over gRPC, one process per plugin, so that the benchmarks of this module
// can set the usual way of isolating Go plugins beside the host's
// WebAssembly plugins and its native ones.
//
// The plugin process runs the provider's abi.Handler (the same code a
// WebAssembly plugin runs in its guest, or host.LoadNative runs in the
// host). The gRPC service has one unary method per export, carrying the
// export's JSON envelope as bytes in both directions, as go-plugin
// protocols commonly carry their payloads (Terraform's DynamicValue, for
// one). In the host, Client.Handler is an abi.Handler that forwards each
// call to the plugin process, loaded with host.LoadNative: the host code
// (envelopes, validation, state patches, windows) is the same for all
// three, and they differ only by the boundary a call crosses.
//
// This is a module of its own so that the main module never requires
// go-plugin or gRPC.
package peer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime/metrics"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wasmhist/wasmhist/abi"
)

// PluginName is the name the plugin is dispensed under.
const PluginName = "history"

// service is the gRPC service name; each export is a method of it.
const service = "wasmhist.peer.Provider"

// statsMethod reports the plugin process's heap allocation counters, so
// that a benchmark can count the allocations a call causes there too.
const statsMethod = "_stats"

// maxMessage bounds one gRPC message either way: a state of thousands of
// messages is far above gRPC's default 4 MiB receive limit.
const maxMessage = 256 << 20

// Handshake is what the host and the plugin process check before talking.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "WASMHIST_PEER_PLUGIN",
	MagicCookieValue: "history-provider",
}

// Serve runs the plugin process's side: it serves h until the host ends the
// process. It is the whole main function of a plugin binary.
func Serve(h abi.Handler) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &grpcPlugin{handler: h}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))...)
		},
		Logger: hclog.NewNullLogger(),
	})
}

// grpcPlugin is the go-plugin definition of the provider: the server side
// registers the service, the client side returns a *Client.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	handler abi.Handler
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	desc := grpc.ServiceDesc{ServiceName: service, HandlerType: (*any)(nil)}
	exports := append(append(abi.RequiredExports(), abi.OptionalExports()...), statsMethod)
	for _, export := range exports {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: export, Handler: p.method(export)})
	}
	s.RegisterService(&desc, p)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &remote{conn: conn}, nil
}

// method is the gRPC handler of one export.
func (p *grpcPlugin) method(export string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if export == statsMethod {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			b, o := heapAllocs()
			out := make([]byte, 16)
			binary.LittleEndian.PutUint64(out, b)
			binary.LittleEndian.PutUint64(out[8:], o)
			return wrapperspb.Bytes(out), nil
		}
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		out, err := p.handler(ctx, export, in.Value)
		if err != nil {
			return nil, toStatus(err)
		}
		return wrapperspb.Bytes(out), nil
	}
}

// toStatus carries an *abi.Error as its JSON in the status message, so the
// host sees the same error a WebAssembly or native plugin would return.
func toStatus(err error) error {
	var aerr *abi.Error
	if errors.As(err, &aerr) {
		b, jerr := json.Marshal(aerr)
		if jerr == nil {
			return status.Error(codes.Unknown, string(b))
		}
	}
	return status.Error(codes.Internal, err.Error())
}

func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() == codes.Unknown {
		var aerr abi.Error
		if json.Unmarshal([]byte(st.Message()), &aerr) == nil && aerr.Code != "" {
			return &aerr
		}
	}
	return err
}

// heapAllocs returns the bytes and objects this process has allocated on
// its heap so far.
func heapAllocs() (bytes, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// HeapAllocs is heapAllocs for the host process, the same counters.
func HeapAllocs() (bytes, objects uint64) { return heapAllocs() }

// remote is what the go-plugin client dispenses.
type remote struct{ conn *grpc.ClientConn }

// Client is a started plugin process.
type Client struct {
	c *plugin.Client
	r *remote
}

// Start starts the plugin binary at path and connects to it over gRPC.
func Start(path string) (*Client, error) {
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          plugin.PluginSet{PluginName: &grpcPlugin{}},
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))},
	})
	rpc, err := c.Client()
	if err != nil {
		c.Kill()
		return nil, err
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		c.Kill()
		return nil, err
	}
	return &Client{c: c, r: raw.(*remote)}, nil
}

// Handler forwards every export call to the plugin process.
func (c *Client) Handler() abi.Handler {
	return func(ctx context.Context, export string, input []byte) ([]byte, error) {
		out := new(wrapperspb.BytesValue)
		if err := c.r.conn.Invoke(ctx, "/"+service+"/"+export, wrapperspb.Bytes(input), out); err != nil {
			return nil, fromStatus(err)
		}
		return out.Value, nil
	}
}

// HeapAllocs returns the plugin process's heap allocation counters.
func (c *Client) HeapAllocs(ctx context.Context) (bytes, objects uint64, err error) {
	out := new(wrapperspb.BytesValue)
	if err := c.r.conn.Invoke(ctx, "/"+service+"/"+statsMethod, new(emptypb.Empty), out); err != nil {
		return 0, 0, err
	}
	if len(out.Value) != 16 {
		return 0, 0, errors.New("peer: malformed stats reply")
	}
	return binary.LittleEndian.Uint64(out.Value), binary.LittleEndian.Uint64(out.Value[8:]), nil
}

// Pid is the plugin process's id.
func (c *Client) Pid() int { return c.c.ReattachConfig().Pid }

// Kill ends the plugin process.
func (c *Client) Kill() { c.c.Kill() }
