// The local file system of Hadoop, with the files under one absolute folder read from another:
// paths under `petrel.origin.from` (from the Hadoop configuration) open `petrel.origin.to` + the
// rest of the path instead. Every other path is the plain local file system.
//
// For scripts/corpus/relocate_corpus.py: the fixture corpus was written at an origin folder
// (`/petrel-fixtures-origin/iceberg-corpus`) and moved, so the absolute paths inside its
// metadata name files that are now elsewhere. Spark's rewrite_table_path reads the table through
// its own FileIO at those paths; set as `fs.file.impl` of that one catalog, this class lets it
// read them where they are now, whether spelt `/origin/...` or `file:///origin/...`. Built by
// relocate_corpus.py with javac against pyspark's Hadoop client.
import java.io.File;
import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

public class OriginFileSystem extends LocalFileSystem {
  public OriginFileSystem() {
    super(new Raw());
  }

  /** The raw local file system with the origin folder mapped (checksums are LocalFileSystem's). */
  static class Raw extends RawLocalFileSystem {
    private String from;
    private String to;

    @Override
    public void initialize(URI uri, Configuration conf) throws IOException {
      super.initialize(uri, conf);
      from = conf.get("petrel.origin.from");
      to = conf.get("petrel.origin.to");
      if (from == null || to == null) {
        throw new IOException("OriginFileSystem needs petrel.origin.from and petrel.origin.to");
      }
    }

    @Override
    public File pathToFile(Path path) {
      File file = super.pathToFile(path);
      String p = file.getPath();
      if (p.equals(from) || p.startsWith(from + "/")) {
        return new File(to + p.substring(from.length()));
      }
      return file;
    }
  }
}
