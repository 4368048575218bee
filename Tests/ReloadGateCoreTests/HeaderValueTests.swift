import ReloadGateCore
import Testing

/// The bearer credential and the optional white space every listener reads alike.
struct HeaderValueTests {
    /// The scheme's name in any case followed by one space, then the credential as sent.
    @Test func aBearerCredentialFollowsTheSchemeInAnyCase() {
        #expect(HeaderValue.bearerCredential("bearer rg_abc") == "rg_abc")
        #expect(HeaderValue.bearerCredential("Bearer rg_abc") == "rg_abc")
        #expect(HeaderValue.bearerCredential("BEARER  rg_abc\t") == " rg_abc\t")
        #expect(HeaderValue.bearerCredential("bEaReR ") == "")
        // (A NUL byte is one bit from the space: only a letter is read in the other case.)
        for refused in [nil, "", "bearer", "bearerrg_abc", "bearer\trg_abc", "basic cmc6YWJj", "bearer\u{0}rg", "béarer rg_abc"] {
            #expect(HeaderValue.bearerCredential(refused) == nil, "\(String(describing: refused))")
        }
    }

    /// Spaces and tabs around a value go, nothing else: not those inside, not other Unicode spaces.
    @Test func optionalWhiteSpaceIsSpacesAndTabs() {
        #expect(HeaderValue.trimmed(" \t rg_abc \t") == "rg_abc")
        #expect(HeaderValue.trimmed("rg_a b") == "rg_a b")
        #expect(HeaderValue.trimmed(" \t ") == "")
        #expect(HeaderValue.trimmed("") == "")
        #expect(HeaderValue.trimmed(" é ") == "é")
        #expect(HeaderValue.trimmed("\u{00A0}key\u{00A0}") == "\u{00A0}key\u{00A0}")
        #expect(String(Substring(HeaderValue.trimmed(Substring(" t=1 ").utf8))) == "t=1")
    }
}
