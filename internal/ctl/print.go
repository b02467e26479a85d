package ctl

import (
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// column is a table column; wide ones show with -o wide only.
type column struct {
	name string
	wide bool
}

// printTable prints rows through cli-runtime's table printer (kubectl's layout).
func printTable(w io.Writer, cols []column, rows [][]any, wide bool) error {
	t := &metav1.Table{}
	for _, c := range cols {
		d := metav1.TableColumnDefinition{Name: c.name, Type: "string"}
		if c.wide {
			d.Priority = 1
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, d)
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: r})
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(t, w)
}

// printData writes v as JSON or YAML (-o json|yaml).
func printData(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func checkOutput(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %v", format, allowed)
}
