package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs gorping as this user and group (distroless's "nonroot" numbers; the
// image has no /etc/passwd, so only numbers). /dev/infiniband's nodes are mode 0666 by
// the kernel's default (rdma_cm, uverbsN), so an unprivileged process can open them once
// they are in the container; registering memory then needs a memlock limit that fits
// (see the README's Install section).
const (
	imageUser   = "65532:65532"
	entrypoint  = "/usr/bin/gorping"
	licensePath = "usr/share/doc/gorping/LICENSE"
)

// imageFiles are the regular files of the image's layer, sorted (the Containerfile's
// test compares its COPY destinations with them).
func imageFiles() []string { return []string{strings.TrimPrefix(entrypoint, "/"), licensePath} }

// ImageConfig is what the guest test needs from an image's configuration.
type ImageConfig struct {
	Entrypoint []string
	User       string
	Labels     map[string]string
}

// Labels are the OCI annotations the image's configuration carries.
func Labels(b Build) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "gorping",
		"org.opencontainers.image.description": summary,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Commit,
		"org.opencontainers.image.source":      homepage,
		"org.opencontainers.image.url":         homepage,
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.created":     b.Date.Format("2006-01-02T15:04:05Z"),
	}
}

// Image writes a multi-architecture OCI image (an index of one linux image per arch, each
// FROM scratch: the static binary and the license) as an OCI layout directory and as an
// OCI archive (that directory as a tar: skopeo's and podman's oci-archive:). It returns
// both paths.
func Image(b Build) (dir, archive string, err error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range Arches {
		img, err := archImage(b, arch)
		if err != nil {
			return "", "", fmt.Errorf("image for %s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	dir = filepath.Join(b.Out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return "", "", err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", "", err
	}
	// One entry in index.json, named by the version: oci:DIR:VERSION for skopeo.
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": refName(b.Version),
	})); err != nil {
		return "", "", err
	}
	archive = filepath.Join(b.Out, "gorping-"+b.Version+"-oci.tar")
	return dir, archive, tarDir(dir, archive, b)
}

// refName makes a version a valid OCI reference name ("+" is not one of its characters).
func refName(v string) string { return strings.ReplaceAll(v, "+", "-") }

func archImage(b Build, arch string) (v1.Image, error) {
	bin, err := os.ReadFile(b.Binary(arch))
	if err != nil {
		return nil, err
	}
	lic, err := os.ReadFile(b.License)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/bin/", "usr/share/", "usr/share/doc/", "usr/share/doc/gorping/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: b.Date}); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{strings.TrimPrefix(entrypoint, "/"), 0o755, bin},
		{licensePath, 0o644, lic},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: b.Date}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: b.Date}, CreatedBy: "gorping tools/release: " + entrypoint + " (static, CGO_ENABLED=0), LICENSE", Comment: "commit " + b.Commit},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: b.Date}
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.User = imageUser
	cf.Config.Labels = Labels(b)
	return mutate.ConfigFile(img, cf)
}

// tarDir writes dir's files into a tar at dst, in name order, with fixed times and owners.
func tarDir(dir, dst string, b Build) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: b.Date, Mode: 0o644}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Unpack reads the OCI layout at dir, takes the image for linux/arch out of its index,
// applies its layers in order (mutate.Extract, whiteouts honoured) and writes the
// resulting file system as a tar into out/image-rootfs-<arch>.tar. It returns the image's
// configuration.
func Unpack(dir, arch, out string) (ImageConfig, error) {
	img, err := PlatformImage(dir, arch)
	if err != nil {
		return ImageConfig{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return ImageConfig{}, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return ImageConfig{}, err
	}
	f, err := os.Create(filepath.Join(out, "image-rootfs-"+arch+".tar"))
	if err != nil {
		return ImageConfig{}, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return ImageConfig{}, fmt.Errorf("flatten the layers: %w", err)
	}
	if err := f.Close(); err != nil {
		return ImageConfig{}, err
	}
	return ImageConfig{Entrypoint: cf.Config.Entrypoint, User: cf.Config.User, Labels: cf.Config.Labels}, nil
}

// PlatformImage finds linux/arch in the layout's index (one level of nested index, as
// Image writes it).
func PlatformImage(dir, arch string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(tm.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json lists %d entries, want the one image index", dir, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == arch {
			return idx.Image(m.Digest)
		}
	}
	return nil, fmt.Errorf("%s: no linux/%s image", dir, arch)
}
