// Command filerefs maps the references between the files of one Go
// package: file A refers to file B when code in A uses something declared
// in B (a package-level name, a method or a struct field). A reference
// points back when B also refers to A, so that neither file reads without
// the other; otherwise it points forward. It prints the counts,
// and with -v every reference that points back; with -check it fails
// unless fewer point back than forward: a package whose files can be read
// in an order, each after those it uses.
//
//	cd tools && go run ./filerefs -dir .. [-v] [-tests] [-check] ./server
package main

import (
	"flag"
	"fmt"
	"go/token"
	"go/types"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	verbose := flag.Bool("v", false, "list every reference that points back")
	tests := flag.Bool("tests", false, "include the package's _test.go files")
	dir := flag.String("dir", ".", "the module the package is in")
	check := flag.Bool("check", false, "fail unless fewer references point back than forward")
	flag.Parse()
	if flag.NArg() != 1 {
		log.Fatal("usage: filerefs [-v] [-tests] <package>")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Tests: *tests, Dir: *dir}
	pkgs, err := packages.Load(cfg, flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		os.Exit(1)
	}
	p := pkgs[0]
	for _, q := range pkgs {
		if *tests && strings.HasSuffix(q.ID, ".test]") && !strings.HasSuffix(q.PkgPath, "_test") {
			p = q
		}
	}
	edges := refs(p)
	back, forward := classify(edges)
	files := map[string]bool{}
	for e := range edges {
		files[e[0]], files[e[1]] = true, true
	}
	fmt.Printf("%s: %d files, %d references: %d point forward, %d point back\n", p.PkgPath, len(p.Syntax), len(edges), len(forward), len(back))
	failed := *check && len(back) >= len(forward)
	if failed {
		fmt.Printf("%s: as many references point back as forward, or more: its files read only together (-v lists them)\n", p.PkgPath)
	}
	if *verbose {
		slices.SortFunc(back, func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) })
		for _, e := range back {
			fmt.Printf("  %s -> %s\n", e[0], e[1])
		}
	}
	if failed {
		os.Exit(1)
	}
}

// refs returns the set of file-to-file references inside p.
func refs(p *packages.Package) map[[2]string]bool {
	fileOf := func(pos token.Pos) string {
		if !pos.IsValid() {
			return ""
		}
		return filepath.Base(p.Fset.File(pos).Name())
	}
	edges := map[[2]string]bool{}
	for id, obj := range p.TypesInfo.Uses {
		if obj.Pkg() != p.Types || !declaredAtTop(obj) {
			continue
		}
		from, to := fileOf(id.Pos()), fileOf(obj.Pos())
		if from != "" && to != "" && from != to {
			edges[[2]string{from, to}] = true
		}
	}
	for sel, s := range p.TypesInfo.Selections {
		obj := s.Obj()
		if obj.Pkg() != p.Types {
			continue
		}
		from, to := fileOf(sel.Sel.Pos()), fileOf(obj.Pos())
		if from != "" && to != "" && from != to {
			edges[[2]string{from, to}] = true
		}
	}
	return edges
}

// declaredAtTop reports whether obj is a package-level name, a method or a
// field: the things one file can declare for another to use.
func declaredAtTop(obj types.Object) bool {
	switch o := obj.(type) {
	case *types.Func:
		return true
	case *types.Var:
		if o.IsField() {
			return true
		}
	}
	return obj.Parent() == obj.Pkg().Scope()
}

// classify splits the references into those answered by one in the other
// direction (back: the two files refer to each other) and the rest
// (forward).
func classify(edges map[[2]string]bool) (back, forward [][2]string) {
	for e := range edges {
		if edges[[2]string{e[1], e[0]}] {
			back = append(back, e)
		} else {
			forward = append(forward, e)
		}
	}
	return back, forward
}
