// Package ppocr is PaddleOCR's PP-OCR pipeline around its three models, as
// examples/ocr runs it on the AliDNN engine: the pre-processing each model
// expects (Det, Cls and Rec inputs), the DB detector's probability map
// turned into text boxes (Boxes), and the recogniser's CTC output decoded
// with its dictionary (Dict.Decode). Render draws text lines with the Go
// fonts, the images the tests and the example read.
package ppocr
