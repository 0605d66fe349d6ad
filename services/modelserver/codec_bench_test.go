package modelserver

import (
	"net/http"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkRESTCodec measures what the REST path spends on an MNIST
// request outside the engine and net/http: parsing the body into tensors,
// building the answer from the run's outputs and writing it. binary:
// binary tensor data both ways, as BenchmarkThroughput/rest sends; json:
// 784 numbers in, 10 out.
func BenchmarkRESTCodec(b *testing.B) {
	in := mnistCases(b)[0].Input
	ins := []tensorSpec{{Name: in.Name, Type: onnx.Float, Shape: in.Dims}}
	outs := []tensorSpec{{Name: mnistOutput, Type: onnx.Float, Shape: []int64{1, 10}}}
	scores := onnx.NewFloat32(mnistOutput, []int64{1, 10}, []float32{-1.25, 0.5, 3.1415927, -0.001, 12.5, 7e-7, -2.5e3, 0, 1, 0.33333334})
	binBody, binHeader := binaryInfer(b, in, true)
	for _, c := range []struct {
		name      string
		body      []byte
		headerLen int64
	}{
		{"binary", binBody, int64(len(binBody) - 4*784)},
		{"json", jsonInfer(b, "1", in, nil), -1},
	} {
		b.Run(c.name, func(b *testing.B) {
			_ = binHeader
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				req, err := parseInferRequest(c.body, c.headerLen, ins, outs)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := newResponse("mnist", "1", req, []*onnx.Tensor{scores})
				if err != nil {
					b.Fatal(err)
				}
				resp.write(w)
			}
		})
	}
}
